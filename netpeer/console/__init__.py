"""netpeerd's web console (``console_listen``; docs/console.md): pages
rendered on the server, a little JavaScript, live updates from the Watch
API. ``netpeer.console.server.Console`` serves it."""
