"""The dashboard over real sockets, without a browser: pages, escaping,
404s, actions, sessions, login and CSRF, against real disque-server processes.

Jobs and queues are made with redis-py as any client would; the dashboard
is read and driven with a plain HTTP client that keeps its cookies
(tests/dashboard_support.py) and follows no redirect, so every 303 and
403 is seen.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlsplit

import pytest

from tests.dashboard_support import DASHBOARD, DashboardClient
from tests.integration.test_protected_mode import UnboundServer, netns  # noqa: F401 (fixture)
from tests.support import free_port, wait_for
from disque_py.web.server import local_url
from tests.web_support import http_get, http_server, running_http_server

PASSWORD = "dashboard-s3cret"
SCRIPT_QUEUE = "<script>alert('q')</script>"
SCRIPT_BODY = "<img src=x onerror=alert(1)>&amp;"
DEAD_LETTER_BADGE = '<span class="badge dead">dead letters</span>'
LOGGED_URL = re.compile(r"HTTP \(/metrics, /healthz, /readyz\) is served on port (\d+); "
                        r"the dashboard is at (\S+)$", re.MULTILINE)
BULK_JOBS = 1234


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with running_http_server(tmp_path_factory.mktemp("dashboard")) as proc:
        yield proc


@pytest.fixture
def client(node):
    node.client().execute_command("DEBUG", "FLUSHALL")
    return node.client()


@pytest.fixture
def web(node):
    return DashboardClient(node.http_port)


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    """A node with a password."""
    with running_http_server(tmp_path_factory.mktemp("locked"), PASSWORD) as proc:
        yield proc


def queue_path(name: str, **params) -> str:
    extra = "".join(f"&{key}={value}" for key, value in params.items())
    return f"{DASHBOARD}queue?name={quote(name, safe='')}{extra}"


def job_path(job_id: str) -> str:
    return f"{DASHBOARD}job?id={quote(job_id, safe='')}"   # IDs hold '+' and '/'


def qstat(client, name: str) -> dict:
    reply = client.execute_command("QSTAT", name)
    return {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}


def queue_row(page: str, name: str) -> str:
    """The overview's row of a queue, as HTML."""
    rows = [row for row in page.split("<tr>") if f'class="queue-name">{name}</a>' in row]
    assert len(rows) == 1, f"{len(rows)} rows for {name}"
    return rows[0]


def node_field(page: str, label: str) -> str:
    """A figure of the overview's node fields, as the page writes it."""
    found = re.search(rf"<span>{re.escape(label)}</span> <strong>([^<]*)</strong>", page)
    assert found, f"no {label} on the overview"
    return found.group(1)


def dead_letter(client, queue: str, *options) -> str:
    """A job of `queue` whose one delivery is spent: NACKed, it is dead."""
    job_id = client.execute_command("ADDJOB", queue, "img", 0, "RETRY", 1, "MAXDELIVERIES", 1,
                                    *options).decode()
    client.execute_command("GETJOB", "FROM", queue)
    client.execute_command("NACK", job_id)
    return job_id


# ---------------------------------------------------------------- pages

def test_the_root_leads_to_the_overview(client, web):
    for path in ("/", "/dashboard"):
        reply = web.get(path)
        assert reply.status == 302 and reply.location == DASHBOARD
    reply = web.get(f"{DASHBOARD}login")                  # no password: nothing to log in to
    assert reply.status == 303 and reply.location == DASHBOARD
    page = web.get()
    assert page.status == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert client.execute_command("CLUSTER", "MYID").decode() in page.text


def test_a_queue_shows_on_the_overview_with_its_length(client, web):
    for i in range(7):
        client.execute_command("ADDJOB", "orders", f"order {i}", 0)
    page = web.get()
    assert 'class="queue-name">orders</a>' in page.text
    assert '<td class="num queue-len">7</td>' in page.text


def test_user_data_is_escaped_everywhere(client, web):
    job_id = client.execute_command("ADDJOB", SCRIPT_QUEUE, SCRIPT_BODY, 0).decode()
    pages = [web.get(), web.get(queue_path(SCRIPT_QUEUE)), web.get(job_path(job_id))]
    for page in pages:
        assert page.status == 200
        assert SCRIPT_QUEUE not in page.text and "<img src=x" not in page.text
        assert html.escape(SCRIPT_QUEUE, quote=False) in page.text.replace("&#39;", "'")
    assert html.escape(SCRIPT_BODY, quote=False) in pages[2].text
    # The pages carry no script and say so to the browser.
    assert "<script" not in "".join(page.text for page in pages).lower()
    assert "default-src 'none'" in pages[0].headers["Content-Security-Policy"]


def test_the_start_up_log_names_the_dashboards_url(node):
    logged = wait_for(lambda: LOGGED_URL.search(node.log_text()), message="the HTTP log line")
    assert logged.group(1) == str(node.http_port)
    url = logged.group(2)
    assert url == f"http://127.0.0.1:{node.http_port}/dashboard/"
    status, _, body = http_get(urlsplit(url).port, urlsplit(url).path)
    assert status == 200 and b"<h1>Node " in body


@pytest.mark.parametrize("address, url", [
    ("127.0.0.1", "http://127.0.0.1:8080/dashboard/"),
    (None, "http://localhost:8080/dashboard/"),             # every address
    ("0.0.0.0", "http://127.0.0.1:8080/dashboard/"),
    ("::", "http://[::1]:8080/dashboard/"),
    ("fd00::7", "http://[fd00::7]:8080/dashboard/"),
])
def test_the_logged_url_is_one_a_browser_on_this_host_opens(address, url):
    assert local_url(address, 8080, DASHBOARD) == url


def test_numbers_are_written_with_thousands_separators_and_sizes_in_binary_units(client, web):
    pipe = client.pipeline(transaction=False)
    for i in range(BULK_JOBS):
        pipe.execute_command("ADDJOB", "bulk", f"job {i}", 0)
    pipe.execute()
    page = web.get().text
    assert '<td class="num queue-len">1,234</td>' in queue_row(page, "bulk")
    assert node_field(page, "registered_jobs") == "1,234"
    assert node_field(page, "tcp_port") == str(client.connection_pool.connection_kwargs["port"])
    assert re.fullmatch(r"\d{1,4}\.\d (KiB|MiB|GiB)", node_field(page, "used_memory"))
    maxmemory = int(client.config_get("maxmemory")["maxmemory"])
    assert maxmemory == 2 ** 30 and node_field(page, "maxmemory") == "1.0 GiB"
    queue_page = web.get(queue_path("bulk")).text
    for field in ("len", "jobs-in"):
        assert f'<tr><th>{field}</th><td class="mono">1,234</td></tr>' in queue_page


def test_a_lone_node_reaches_no_peer_in_a_cluster_of_one(client, web):
    page = web.get().text
    assert node_field(page, "cluster_size") == "1"
    assert node_field(page, "cluster_reachable_peers") == "0"
    assert "cluster_reachable_nodes" not in page
    # What a Disque client reads is Disque's own field, unchanged.
    cluster_info = client.execute_command("CLUSTER", "INFO").decode()
    assert "cluster_reachable_nodes:0\r\n" in cluster_info
    assert "cluster_size:1\r\n" in cluster_info


def test_unknown_queues_and_jobs_are_404(client, web):
    assert web.get(queue_path("nope")).status == 404
    assert web.get(f"{DASHBOARD}queue").status == 404
    unknown = "D-abcdef01-" + "A" * 24 + "-0001"
    for job in (unknown, "not-an-id", ""):
        page = web.get(job_path(job))
        assert page.status == 404 and "No such job" in page.text
    assert web.get(f"{DASHBOARD}nothing-here").status == 404


def test_a_queue_page_lists_jobs_in_getjob_order_a_page_at_a_time(client, web):
    ids = [client.execute_command("ADDJOB", "work", f"job {i}", 0).decode() for i in range(60)]
    urgent = client.execute_command("ADDJOB", "work", "urgent", 0, "PRIORITY", 9).decode()
    peeked = [job[1].decode() for job in client.execute_command("QPEEK", "work", 61)]
    assert peeked[0] == urgent
    first = web.get(queue_path("work"))
    shown = [job for job in peeked if job in first.text]
    assert shown == peeked[:50]
    assert first.text.index(peeked[0]) < first.text.index(peeked[1]) < first.text.index(peeked[49])
    second = web.get(queue_path("work", offset=50))
    assert [job for job in peeked if job in second.text] == peeked[50:]
    assert ids[0] in first.text


def test_a_delayed_job_is_listed_as_not_queued_yet(client, web):
    job_id = client.execute_command("ADDJOB", "later", "soon", 0, "DELAY", 60).decode()
    client.execute_command("ADDJOB", "later", "now", 0)
    page = web.get(queue_path("later"))
    table = page.text[page.text.index('id="not-queued"'):]
    assert job_id in table


def test_the_job_page_shows_what_show_gives(client, web):
    job_id = client.execute_command("ADDJOB", "q", "payload", 0, "RETRY", 30, "TTL", 300,
                                    "MAXDELIVERIES", 3).decode()
    page = web.get(job_path(job_id))
    show = client.execute_command("SHOW", job_id)
    names = [show[i].decode() for i in range(0, len(show), 2)]
    for name in names:
        if name != "body":
            assert f"<th>{name}</th>" in page.text
    assert '<pre id="body">payload</pre>' in page.text


def test_the_latency_page_shows_the_slow_log(client, web):
    client.execute_command("CONFIG", "SET", "slowlog-log-slower-than", 0)
    try:
        client.execute_command("QLEN", "marker-queue-<b>")
        page = web.get(f"{DASHBOARD}latency")
    finally:
        client.execute_command("CONFIG", "SET", "slowlog-log-slower-than", 10000)
    assert page.status == 200
    assert "qlen marker-queue-&lt;b&gt;" in page.text.lower()


# -------------------------------------------------------------- actions

def test_pause_and_resume_through_the_form(client, web):
    client.execute_command("ADDJOB", "jobs", "x", 0)
    csrf = web.csrf(queue_path("jobs"))
    reply = web.post(f"{DASHBOARD}queue/pause", {"csrf": csrf, "queue": "jobs", "state": "out"})
    assert reply.status == 303 and reply.location == queue_path("jobs")
    assert qstat(client, "jobs")["pause"] == b"out"
    page = web.get(reply.location)
    assert "pause state is now out" in page.text and 'id="pause-state">paused: out' in page.text
    web.post(f"{DASHBOARD}queue/pause", {"csrf": csrf, "queue": "jobs", "state": "none"})
    assert qstat(client, "jobs")["pause"] == b"none"


def test_an_action_is_one_command_seen_by_monitor(client, node, web):
    client.execute_command("ADDJOB", "jobs", "x", 0)
    csrf = web.csrf(queue_path("jobs"))
    monitor = node.raw()
    assert monitor.call("MONITOR") == b"+OK\r\n"
    web.post(f"{DASHBOARD}queue/pause", {"csrf": csrf, "queue": "jobs", "state": "in"})
    line = monitor.read_reply()
    assert b'[http:127.0.0.1:' in line and line.endswith(b'"pause" "jobs" "in"\r\n'), line
    client.execute_command("PAUSE", "jobs", "none")


def test_a_bad_pause_state_is_400_and_changes_nothing(client, web):
    client.execute_command("ADDJOB", "jobs", "x", 0)
    reply = web.post(f"{DASHBOARD}queue/pause",
                     {"csrf": web.csrf(queue_path("jobs")), "queue": "jobs", "state": "sideways"})
    assert reply.status == 400 and "pause state must be one of" in reply.text
    assert qstat(client, "jobs")["pause"] == b"none"


def test_requeue_a_dead_letter_queue(client, web):
    job_id = client.execute_command("ADDJOB", "resize", "img", 0, "RETRY", 1,
                                    "MAXDELIVERIES", 1).decode()
    client.execute_command("GETJOB", "FROM", "resize")
    client.execute_command("NACK", job_id)          # its one delivery is spent: dead
    wait_for(lambda: client.execute_command("QLEN", "resize:dead") == 1, message="dead letter")
    page = web.get()
    assert "dead letters" in page.text
    reply = web.post(f"{DASHBOARD}queue/requeue", {"csrf": web.csrf(queue_path("resize:dead")),
                                                       "queue": "resize:dead"})
    assert reply.status == 303
    assert client.execute_command("QLEN", "resize:dead") == 0
    assert client.execute_command("QLEN", "resize") == 1
    assert "1 dead-lettered job(s) queued again" in web.get(reply.location).text


def test_dead_letter_queues_are_marked_when_empty_too(client, node, web):
    dead_letter(client, "resize")                                   # to resize:dead
    dead_letter(client, "thumbs", "DEADLETTER", "failed-images")
    for queue in ("resize:dead", "failed-images"):
        wait_for(lambda: client.execute_command("QLEN", queue) == 1, message=queue)
        assert client.execute_command("QREQUEUE", queue) == 1
        assert client.execute_command("QLEN", queue) == 0
    consumer = node.raw()             # waits on a dead-letter queue no job reached yet
    consumer.send(b"GETJOB TIMEOUT 60000 FROM parked:dead\r\n")
    wait_for(lambda: client.execute_command("QSTAT", "parked:dead") is not None,
             message="the consumer's queue")
    # failed-images is known by the job of thumbs that names it: the
    # dashboard's walk of the jobs table finds it within a second or two.
    wait_for(lambda: DEAD_LETTER_BADGE in queue_row(web.get().text, "failed-images"),
             message="failed-images marked")
    page = web.get().text
    for queue in ("resize:dead", "failed-images", "parked:dead"):
        assert DEAD_LETTER_BADGE in queue_row(page, queue), queue
        assert '<td class="num queue-len">0</td>' in queue_row(page, queue), queue
    for queue in ("resize", "thumbs"):
        assert DEAD_LETTER_BADGE not in queue_row(page, queue), queue
    assert DEAD_LETTER_BADGE in web.get(queue_path("failed-images")).text
    assert DEAD_LETTER_BADGE not in web.get(queue_path("thumbs")).text
    consumer.close()


def test_delete_a_job(client, web):
    job_id = client.execute_command("ADDJOB", "q", "bye", 0).decode()
    reply = web.post(f"{DASHBOARD}job/delete", {"csrf": web.csrf(queue_path("q")), "job": job_id})
    assert reply.status == 303 and reply.location == queue_path("q")
    assert client.execute_command("SHOW", job_id) is None


def test_a_queue_named_with_any_bytes_round_trips_through_the_forms(client, web):
    name = b"caf\xe9 & <q>"                  # not UTF-8
    client.execute_command("ADDJOB", name, "x", 0)
    path = f"{DASHBOARD}queue?name={quote(name, safe='')}"
    assert web.get(path).status == 200
    web.post(f"{DASHBOARD}queue/pause",
             {"csrf": web.csrf(path), "queue": quote(name, safe=""), "state": "in"})
    assert client.execute_command("QSTAT", name)[-1] == b"in"


def test_an_action_whose_command_rename_command_removed_is_refused(tmp_path):
    proc, http_port = http_server(tmp_path / "renamed", "--rename-command", "DELJOB", "")
    proc.start()
    try:
        job_id = proc.client().execute_command("ADDJOB", "q", "x", 0).decode()
        web = DashboardClient(http_port)
        reply = web.post(f"{DASHBOARD}job/delete",
                         {"csrf": web.csrf(queue_path("q")), "job": job_id})
        assert reply.status == 400 and "disabled on this node" in reply.text
        assert proc.client().execute_command("SHOW", job_id) is not None
    finally:
        proc.stop()


# ----------------------------------------------------------------- CSRF

def test_a_post_without_the_csrf_token_is_refused(client, web):
    client.execute_command("ADDJOB", "jobs", "x", 0)
    web.get()                                             # has a session, not the token
    for form in ({"queue": "jobs", "state": "all"},
                 {"queue": "jobs", "state": "all", "csrf": ""},
                 {"queue": "jobs", "state": "all", "csrf": "forged"}):
        reply = web.post(f"{DASHBOARD}queue/pause", form)
        assert reply.status == 403 and "CSRF" in reply.text
    other = DashboardClient(web.port)                     # another visitor's token
    reply = web.post(f"{DASHBOARD}queue/pause",
                     {"queue": "jobs", "state": "all", "csrf": other.csrf(queue_path("jobs"))})
    assert reply.status == 403
    cookieless = DashboardClient(web.port)                # a cross-site form: no cookie
    reply = cookieless.post(f"{DASHBOARD}queue/pause",
                            {"queue": "jobs", "state": "all",
                             "csrf": web.csrf(queue_path("jobs"))})
    assert reply.status == 403
    assert qstat(client, "jobs")["pause"] == b"none"


def test_the_session_cookie_is_httponly_and_samesite_strict(web):
    web.get()
    header = web.set_cookie_headers[-1].lower()
    assert header.startswith(f"disque_dashboard_{web.port}=")
    assert "httponly" in header and "samesite=strict" in header and "path=/dashboard/" in header


# ---------------------------------------------------------------- login

def test_with_a_password_every_page_and_action_needs_a_login(locked):
    web = DashboardClient(locked.http_port)
    for path in (DASHBOARD, f"{DASHBOARD}latency", f"{DASHBOARD}queue?name=q"):
        reply = web.get(path)
        assert reply.status == 303 and reply.location == f"{DASHBOARD}login"
    login_page = web.get(f"{DASHBOARD}login")
    assert login_page.status == 200 and 'type="password"' in login_page.text
    csrf = web.csrf(f"{DASHBOARD}login")
    reply = web.post(f"{DASHBOARD}queue/pause", {"csrf": csrf, "queue": "q", "state": "all"})
    assert reply.status == 403
    assert locked.client(password=PASSWORD).execute_command("QSTAT", "q") is None


def test_a_wrong_password_is_refused_and_the_right_one_opens_a_new_session(locked):
    web = DashboardClient(locked.http_port)
    reply = web.log_in("wrong")
    assert reply.status == 401 and "Wrong password" in reply.text
    before = dict(web.cookies)
    reply = web.log_in(PASSWORD)
    assert reply.status == 303 and reply.location == DASHBOARD
    cookie = f"disque_dashboard_{locked.http_port}"
    assert web.cookies[cookie] != before[cookie]                       # no fixation
    assert web.get().status == 200
    stale = DashboardClient(locked.http_port)
    stale.cookies = before                                # the pre-login token is dead
    assert stale.get().status == 303


def test_a_login_without_the_csrf_token_is_refused(locked):
    web = DashboardClient(locked.http_port)
    web.get(f"{DASHBOARD}login")
    assert web.post(f"{DASHBOARD}login", {"password": PASSWORD}).status == 403


def test_logout_and_a_new_password_end_sessions(locked):
    admin = locked.client(password=PASSWORD)
    web, other = DashboardClient(locked.http_port), DashboardClient(locked.http_port)
    web.log_in(PASSWORD)
    other.log_in(PASSWORD)
    reply = web.post(f"{DASHBOARD}logout", {"csrf": web.csrf()})
    assert reply.status == 303 and web.get().status == 303
    assert other.get().status == 200
    admin.execute_command("CONFIG", "SET", "requirepass", "another")
    try:
        assert other.get().status == 303
    finally:
        locked.client(password="another").execute_command("CONFIG", "SET",
                                                          "requirepass", PASSWORD)


def test_logged_in_actions_work(locked):
    admin = locked.client(password=PASSWORD)
    admin.execute_command("ADDJOB", "q", "x", 0)
    web = DashboardClient(locked.http_port)
    web.log_in(PASSWORD)
    reply = web.post(f"{DASHBOARD}queue/pause", {"csrf": web.csrf(), "queue": "q", "state": "in"})
    assert reply.status == 303
    assert admin.execute_command("QSTAT", "q")[-1] == b"in"
    admin.execute_command("PAUSE", "q", "none")


# ------------------------------------------------------- protected mode

def remote_request(netns, port: int, path: str, form: str = "") -> str:
    """A GET (a POST with a form) from the namespace's non-loopback
    address: the whole answer."""
    method = "POST" if form else "GET"
    request = (f"{method} {path} HTTP/1.1\r\nHost: node\r\nConnection: close\r\n"
               f"Content-Type: application/x-www-form-urlencoded\r\n"
               f"Content-Length: {len(form)}\r\n\r\n{form}")
    data, closed = netns.call(port, request.encode(), replies=10_000)
    assert closed
    return data.decode("utf-8", "replace")


def test_protected_mode_serves_the_dashboard_to_this_host_only(netns, tmp_path):
    http_port = free_port()
    proc = UnboundServer(tmp_path / "unbound", args=["--http-port", str(http_port)])
    proc.start()
    try:
        proc.client().execute_command("ADDJOB", "q", "x", 0)
        for path in (DASHBOARD, f"{DASHBOARD}latency", f"{DASHBOARD}queue?name=q"):
            remote = remote_request(netns, http_port, path)
            assert remote.startswith("HTTP/1.1 403") and "protected mode" in remote
        remote = remote_request(netns, http_port, f"{DASHBOARD}queue/pause",
                                "queue=q&state=all&csrf=x")
        assert remote.startswith("HTTP/1.1 403") and "protected mode" in remote
        assert proc.client().execute_command("QSTAT", "q")[-1] == b"none"
        # /healthz is not the dashboard's; this host is served.
        assert remote_request(netns, http_port, "/healthz").startswith("HTTP/1.1 200")
        assert http_get(http_port, DASHBOARD)[0] == 200
        proc.client().execute_command("CONFIG", "SET", "protected-mode", "no")
        assert remote_request(netns, http_port, DASHBOARD).startswith("HTTP/1.1 200")
    finally:
        proc.stop()
