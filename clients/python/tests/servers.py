"""servers.py - the servers of the suite when no driver gave them (a plain
`python3 -m pytest`, conftest.py): a private redis-server on a free
127.0.0.1 port, PostgreSQL (initdb and pg_ctl of $PG_BINDIR, default
/usr/lib/postgresql/15/bin; as root run as the user postgres through
runuser, its folder given to that user) with database ferry, and a ferryd
with the queues of tests/ferryd.ini, all in one temp folder removed by
stop(). As tests/integration/test_python_client.c sets them up (with
harness_client.c's [queue pg] into table events). A server that cannot
start raises ServerError with the reason and the end of its log, after
what did start was stopped."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import redis

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                   ".."))
PG_BINDIR = os.environ.get("PG_BINDIR") or "/usr/lib/postgresql/15/bin"
START_S = 60


class ServerError(RuntimeError):
    """A server of the tests did not start (the reason in the message)."""


def tail(path, lines=30):
    """The last lines of a log file, or "" when there is none."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_ferryd():
    """ferryd: $FERRYD, else the build's (build/src/ferryd or build/ferryd
    beside clients/), else on PATH."""
    if os.environ.get("FERRYD"):
        return os.environ["FERRYD"]
    for path in (os.path.join(TOP, "build", "src", "ferryd"),
                 os.path.join(TOP, "build", "ferryd")):
        if _executable(path):
            return path
    found = shutil.which("ferryd")
    if found is None:
        raise ServerError("no ferryd: set FERRYD, build it (build/ferryd: "
                          "mkdir build && cd build && ../configure && make) "
                          "or put it on PATH")
    return found


def find_ferryctl(ferryd):
    """ferryctl: $FERRYCTL, else beside ferryd, else on PATH."""
    if os.environ.get("FERRYCTL"):
        return os.environ["FERRYCTL"]
    beside = os.path.join(os.path.dirname(ferryd), "ferryctl")
    if _executable(beside):
        return beside
    found = shutil.which("ferryctl")
    if found is None:
        raise ServerError("no ferryctl beside %s nor on PATH: set FERRYCTL"
                          % ferryd)
    return found


def built_script(ferryd):
    """The enqueue.lua ferryd's build made (for the test that the client's
    copy is the same), else the installed one, else None."""
    d = os.path.dirname(ferryd)
    for path in (os.path.join(d, "gen", "lua", "enqueue.lua"),
                 os.path.join(d, "..", "gen", "lua", "enqueue.lua"),
                 os.path.join(d, "..", "share", "ferry", "lua",
                              "enqueue.lua")):
        if os.path.exists(path):
            return os.path.abspath(path)
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pong(port):
    """Does 127.0.0.1:port answer PING with PONG?"""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def run(argv, log, **kw):
    """Runs a program to its end, its output appended to log; ServerError
    naming it, its exit and the end of the log when it fails."""
    with open(log, "ab") as out:
        try:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out,
                           stderr=subprocess.STDOUT, check=True,
                           timeout=START_S, **kw)
        except (OSError, subprocess.SubprocessError) as e:
            raise ServerError("%s failed (%s):\n%s" % (" ".join(argv), e,
                                                       tail(log))) from None


def child(argv, log):
    """A child process in its own session (the terminal's Ctrl-C is the
    suite's to handle), its output to log."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop_child(proc, seconds=10):
    """SIGTERM, then SIGKILL after seconds; returns once it exited."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pg_user():
    """As root, the user postgres runs PostgreSQL's programs (it refuses
    root): (argv prefix, uid, gid); else ([], None, None)."""
    if os.geteuid() != 0:
        return [], None, None
    import pwd
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerError("running as root, but there is no user postgres to "
                          "run initdb and postgres as (apt-get install "
                          "postgresql-15 creates it)") from None
    return ["runuser", "-u", "postgres", "--"], pw.pw_uid, pw.pw_gid


class Servers:
    """Redis, PostgreSQL and ferryd in one temp folder (start(), then
    stop(), which never raises)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ferry-python-test-")
        os.chmod(self.dir, 0o755)        # the user postgres goes through it
        self.redis = None
        self.redis_port = None
        self.pg = None
        self.pg_port = None
        self.ferryd = None
        self.env = {}

    def start_redis(self):
        binary = os.environ.get("REDIS_SERVER") or "redis-server"
        log = os.path.join(self.dir, "redis.log")
        for attempt in range(1, 4):
            port = free_port()
            if os.path.exists(log):
                os.unlink(log)
            try:
                proc = child([binary, "--port", str(port), "--bind",
                              "127.0.0.1", "--dir", self.dir, "--save", "",
                              "--appendonly", "no", "--daemonize", "no"], log)
            except OSError as e:
                raise ServerError("%s: %s (is redis-server installed? "
                                  "scripts/deps)" % (binary, e)) from None
            end = time.monotonic() + START_S
            while proc.poll() is None and time.monotonic() < end and \
                    not pong(port):
                time.sleep(0.02)
            if proc.poll() is None and pong(port):
                self.redis, self.redis_port = proc, port
                return port
            stop_child(proc, 1)
            why = tail(log)
            if attempt < 3 and "Address already in use" in why:
                continue
            raise ServerError("%s did not start on 127.0.0.1:%d (%s):\n%s"
                              % (binary, port, "exit %s" % proc.returncode
                                 if proc.returncode is not None else
                                 "no PONG within %d s" % START_S, why))

    def start_pg(self, sql):
        prefix, uid, gid = pg_user()
        d = os.path.join(self.dir, "pg")
        data = os.path.join(d, "data")
        log = os.path.join(d, "postgres.log")
        os.mkdir(d)
        if uid is not None:
            os.chown(d, uid, gid)

        def binary(name):
            return os.path.join(PG_BINDIR, name)
        if not _executable(binary("initdb")) or \
                not _executable(binary("pg_ctl")):
            raise ServerError("no initdb and pg_ctl in %s (set PG_BINDIR; "
                              "scripts/deps installs postgresql-15)"
                              % PG_BINDIR)
        setup = os.path.join(self.dir, "pg-setup.log")
        run(prefix + [binary("initdb"), "-D", data, "-U", "postgres", "-A",
                      "trust", "-E", "UTF8", "--no-locale", "--no-sync",
                      "--no-instructions"], setup, cwd=d)
        for attempt in range(1, 4):
            port = free_port()
            try:
                run(prefix + [binary("pg_ctl"), "-D", data, "-l", log, "-w",
                              "-t", "60", "-o",
                              "-k %s -h 127.0.0.1 -p %d -c fsync=off -c "
                              "full_page_writes=off -c shared_buffers=32MB"
                              % (d, port), "start"], setup, cwd=d)
            except ServerError as e:
                if attempt < 3 and "Address already in use" in tail(log):
                    continue
                raise ServerError("%s\n%s" % (e, tail(log))) from None
            self.pg = (prefix, data)
            self.pg_port = port
            break
        psql = [binary("psql") if _executable(binary("psql")) else "psql",
                "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                str(self.pg_port), "-U", "postgres"]
        run(psql + ["-d", "postgres", "-c", "CREATE DATABASE ferry"], setup)
        schema = os.path.join(self.dir, "schema.sql")
        with open(schema, "w") as f:
            f.write(sql)
        run(psql + ["-d", "ferry", "-f", schema], setup)
        return port

    def start_ferryd(self, queues):
        ferryd = find_ferryd()
        ferryctl = find_ferryctl(ferryd)
        config = os.path.join(self.dir, "ferryd.ini")
        with open(config, "w") as f:
            f.write("[ferryd]\npidfile = %(d)s/ferryd.pid\n"
                    "log = %(d)s/ferryd.log\nlog_level = debug\n"
                    "control_socket = %(d)s/ferryd.sock\n"
                    "redis_host = 127.0.0.1\nredis_port = %(r)d\n"
                    "pg_host = 127.0.0.1\npg_port = %(p)d\n"
                    "pg_database = ferry\npg_user = postgres\n\n"
                    % {"d": self.dir, "r": self.redis_port,
                       "p": self.pg_port} + queues)
        run([ferryctl, "-c", config, "init-db"],
            os.path.join(self.dir, "init-db.log"))
        log = os.path.join(self.dir, "ferryd.log")
        out = os.path.join(self.dir, "ferryd.out")
        self.ferryd = child([ferryd, "-f", "-c", config], out)
        end = time.monotonic() + START_S

        def check(what):
            if self.ferryd.poll() is not None:
                raise ServerError("%s exited (%s):\n%s\n%s" % (
                    ferryd, self.ferryd.returncode, tail(out), tail(log)))
            if time.monotonic() > end:
                raise ServerError("%s: %s within %d s:\n%s\n%s" % (
                    ferryd, what, START_S, tail(out), tail(log)))
        # up once ferryctl status answers through its control socket
        while subprocess.run([ferryctl, "-c", config, "status"],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode != 0:
            check("no answer to ferryctl status")
            time.sleep(0.05)
        # and each queue with an idempotency_window has it published
        r = redis.Redis(host="127.0.0.1", port=self.redis_port)
        try:
            for q in idempotent_queues(queues):
                while r.hget("ferry:{%s}:config" % q,
                             "idempotency_window") is None:
                    check("the idempotency_window of queue %s not "
                          "published" % q)
                    time.sleep(0.05)
        finally:
            r.close()
        return ferryd, ferryctl, config

    def stop(self):
        """Stops what started and removes the folder; never raises."""
        stop_child(self.ferryd)
        if self.pg is not None:
            prefix, data = self.pg
            argv = prefix + [os.path.join(PG_BINDIR, "pg_ctl"), "-D", data,
                             "-m", "immediate", "-w", "stop"]
            try:
                subprocess.run(argv, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30,
                               check=True)
            except (OSError, subprocess.SubprocessError) as e:
                print("servers.py: %s failed: %s" % (" ".join(argv), e))
            self.pg = None
        stop_child(self.redis)
        shutil.rmtree(self.dir, ignore_errors=True)


def idempotent_queues(queues):
    """The names of the [queue NAME] sections with an idempotency_window."""
    names, queue = [], None
    for line in queues.splitlines():
        m = re.match(r"\s*\[queue\s+([^\]\s]+)\s*\]", line)
        if m:
            queue = m.group(1)
        elif queue and re.match(r"\s*idempotency_window\s*=", line):
            names.append(queue)
    return names


def start(queues, sql):
    """Starts Redis, PostgreSQL (schema: sql) and ferryd (queues: the ini
    text of its queue sections); returns the Servers, whose env holds the
    variables test_python_client.c would set. On failure, stops what
    started and raises ServerError."""
    s = Servers()
    try:
        s.start_redis()
        s.start_pg(sql)
        ferryd, ferryctl, config = s.start_ferryd(queues)
        s.env = {"FERRY_TEST_REDIS_PORT": str(s.redis_port),
                 "FERRY_TEST_PG_PORT": str(s.pg_port),
                 "FERRY_TEST_CONFIG": config,
                 "FERRY_TEST_FERRYCTL": ferryctl}
        script = os.environ.get("FERRY_BUILT_ENQUEUE_LUA") or \
            built_script(ferryd)
        if script is not None:
            s.env["FERRY_BUILT_ENQUEUE_LUA"] = script
        return s
    except BaseException:
        s.stop()
        raise
