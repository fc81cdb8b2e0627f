module netpeer.invalid/lincheck

go 1.23

require github.com/anishathalye/porcupine v1.3.1
