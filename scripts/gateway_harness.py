"""What the evidence scripts (crash_test.py, sink_outage.py) share to run a gateway."""
import http.client
import socket
import time


def free_port():
    """A port nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_healthy(port, seconds=30):
    """True once GET /healthz answers 200, False after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return True
        except OSError:
            time.sleep(0.05)
    return False
