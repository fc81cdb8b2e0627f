"""The inbox in the console, in Chromium against a real netpeerd: a
request appears live, accepting it binds the pair, dismissing hides it
for good while its requester sees no difference, and accepting a request
withdrawn meanwhile, or one whose prefixes now overlap, says so on the
page and changes nothing else."""

from __future__ import annotations

from tests.console.conftest import console_url, sign_in
from tests.console.test_console import shot


def test_the_inbox_lists_accepts_and_dismisses_requests_live(console, browser):
    a, b = console.token("team-a"), console.token("team-b")
    ca, cb = console.client(a), console.client(b)
    for name, subnet in (("web", "10.1.0.0/24"), ("api", "10.1.1.0/24"), ("old", "10.1.2.0/24"),
                         ("clash", "10.9.0.0/24")):
        ca.create_network("team-a", name, [subnet])
    cb.create_network("team-b", "db", ["10.2.0.0/24"])
    ca.create_peering("team-a", "web", "to-db", "db", "team-b")
    page = browser
    sign_in(page, console, b)
    page.goto(console_url(console) + "/inbox?namespace=team-b")
    row = 'tr.request:has-text("team-a/web")'
    assert "10.1.0.0/24" in page.inner_text(row)
    # A request that comes while the page is open appears without a reload.
    page.evaluate("window.notReloaded = true")
    ca.create_peering("team-a", "api", "to-db", "db", "team-b")
    page.wait_for_selector('tr.request:has-text("team-a/api")', timeout=15000)
    assert page.evaluate("window.notReloaded") is True
    shot(page, "inbox")
    # Accept: the matching half is created and the pair binds.
    page.fill(f"{row} form.accept input[name=name]", "from-web")
    page.click(f"{row} form.accept button")
    assert "Accepted: db/from-web" in page.inner_text("#message")
    assert ca.get_peering("team-a", "web", "to-db")["phase"] == "Bound"
    assert page.locator(row).count() == 0
    # Dismiss: gone, and not listed again; the requester's half is as it was.
    before = ca.get_peering("team-a", "api", "to-db")
    page.click('tr.request:has-text("team-a/api") form.dismiss button')
    assert "Dismissed" in page.inner_text("#message")
    page.goto(console_url(console) + "/inbox?namespace=team-b")
    assert page.locator('tr.request:has-text("team-a/api")').count() == 0
    after = ca.get_peering("team-a", "api", "to-db")
    assert (after["phase"], after["reason"], after["message"]) == (before["phase"], before["reason"], before["message"])
    # Withdrawn meanwhile: the page (its live view closed, so the row stays) says so; nothing is created.
    ca.create_peering("team-a", "old", "to-db", "db", "team-b")
    page.goto(console_url(console) + "/inbox?namespace=team-b")
    page.evaluate("window.netpeerStream.close()")
    ca.delete_peering("team-a", "old", "to-db")
    page.click('tr.request:has-text("team-a/old") form.accept button')
    assert "withdrawn" in page.inner_text("#message").lower()
    assert [p["name"] for p in cb.list_peerings("team-b", "db")] == ["from-web"]
    # Prefixes that now overlap: the half is made Failed, and the page says why.
    ca.create_peering("team-a", "clash", "to-db", "db", "team-b")
    cb.update_network("team-b", "db", subnets=["10.2.0.0/24", "10.9.0.0/25"])
    page.goto(console_url(console) + "/inbox?namespace=team-b")
    page.fill('tr.request:has-text("team-a/clash") form.accept input[name=name]', "from-clash")
    page.click('tr.request:has-text("team-a/clash") form.accept button')
    assert "is Failed (OverlappingPrefixes" in page.inner_text("#message")
