"""helpers.py - what the test files share: waiting for ferryd to publish a
queue's idempotency_window, PostgreSQL's answers (FERRY_TEST_PG_PORT),
ferryctl on ferryd's configuration (FERRY_TEST_FERRYCTL, FERRY_TEST_CONFIG;
all set by conftest.py or the driver, tests/integration/
test_python_client.c), and a proxy in front of Redis that loses a reply."""

import os
import socket
import subprocess
import threading
import time


def wait_published(r, queue, want):
    """ferryd publishes a queue's idempotency_window within a second."""
    for _ in range(100):
        got = r.hget("ferry:{%s}:config" % queue, "idempotency_window")
        if (got is not None) == want:
            return
        time.sleep(0.05)
    raise AssertionError("idempotency_window of %s not as expected" % queue)


class ReplyLosingProxy:
    """127.0.0.1:port in front of Redis, forwarding both ways. With
    lose_next set, the next request is forwarded, its reply read and
    dropped, and the connection closed: the command ran, the client never
    hears of it."""

    def __init__(self, redis_port):
        self.redis_port = redis_port
        self.lose_next = False
        self.lost = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(("127.0.0.1", self.redis_port))
            threading.Thread(target=self._pump, args=(client, server),
                             daemon=True).start()

    def _pump(self, client, server):
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    break
                server.sendall(data)
                reply = server.recv(1 << 16)
                if self.lose_next:
                    self.lose_next = False
                    self.lost += 1
                    break
                client.sendall(reply)
        except OSError:
            pass
        client.close()
        server.close()


def pg_value(sql):
    """The first column of the first row of sql on the servers' PostgreSQL
    (database ferry), as text."""
    port = os.environ.get("FERRY_TEST_PG_PORT")
    assert port, "FERRY_TEST_PG_PORT is not set"
    bindir = os.environ.get("PG_BINDIR") or "/usr/lib/postgresql/15/bin"
    psql = os.path.join(bindir, "psql")
    if not os.path.exists(psql):
        psql = "psql"
    return subprocess.run([psql, "-X", "-q", "-t", "-A", "-v",
                           "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", port,
                           "-U", "postgres", "-d", "ferry", "-c", sql],
                          check=True, capture_output=True,
                          text=True).stdout.strip()


def ferryctl(*args):
    """Runs `ferryctl -c CONFIG args...` on the servers' ferryd.ini; its
    output (an AssertionError with it when it fails)."""
    binary = os.environ.get("FERRY_TEST_FERRYCTL")
    config = os.environ.get("FERRY_TEST_CONFIG")
    assert binary and config, "FERRY_TEST_FERRYCTL and FERRY_TEST_CONFIG " \
        "are not set"
    p = subprocess.run([binary, "-c", config] + list(args),
                       capture_output=True, text=True)
    assert p.returncode == 0, "ferryctl %s: exit %d\n%s%s" % (
        " ".join(args), p.returncode, p.stdout, p.stderr)
    return p.stdout
