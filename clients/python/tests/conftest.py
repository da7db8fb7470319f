"""conftest.py - the servers come from the caller
(tests/integration/test_python_client.c starts a real redis-server,
PostgreSQL and ferryd): FERRY_TEST_REDIS_PORT must be set, or every test
fails (never skips)."""

import os

import pytest
import redis


@pytest.fixture
def r():
    port = os.environ.get("FERRY_TEST_REDIS_PORT")
    assert port, "FERRY_TEST_REDIS_PORT is not set: run these tests through " \
        "make check (tests/integration/test_python_client)"
    client = redis.Redis(host="127.0.0.1", port=int(port))
    client.ping()
    return client
