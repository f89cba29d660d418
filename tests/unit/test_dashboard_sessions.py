"""The dashboard's session store, on a fake clock: expiry, eviction, what is kept."""

from __future__ import annotations

from disque_py.web.dashboard.auth import SessionStore, fingerprint


class Ticker:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_by_its_token_and_expires_unused():
    ticker = Ticker()
    store = SessionStore(clock=ticker, ttl_s=60)
    token, session = store.create()
    assert store.find(token) is session
    ticker.now += 59
    assert store.find(token) is session          # its use pushed the expiry back
    ticker.now += 59
    assert store.find(token) is session
    ticker.now += 60
    assert store.find(token) is None
    assert len(store) == 0


def test_unknown_and_empty_tokens_find_nothing():
    store = SessionStore()
    store.create()
    assert store.find(None) is None and store.find("") is None and store.find("x") is None


def test_the_token_itself_is_not_kept():
    store = SessionStore()
    token, session = store.create()
    assert token not in store._sessions and session.key != token
    assert token not in session.csrf


def test_each_session_has_its_own_csrf_token():
    store = SessionStore()
    assert store.create()[1].csrf != store.create()[1].csrf


def test_a_full_store_drops_anonymous_sessions_first():
    ticker = Ticker()
    store = SessionStore(clock=ticker, max_sessions=3)
    logged, _ = store.create(fingerprint(b"pw"))
    first_anonymous, _ = store.create()
    second_anonymous, _ = store.create()
    store.create()
    assert store.find(logged) is not None
    assert store.find(first_anonymous) is None
    assert store.find(second_anonymous) is not None
    assert len(store) == 3


def test_a_full_store_of_logged_in_sessions_drops_the_least_recently_used():
    store = SessionStore(max_sessions=2)
    old, _ = store.create(fingerprint(b"pw"))
    used, _ = store.create(fingerprint(b"pw"))
    store.find(old)                                # now the most recently used
    store.create(fingerprint(b"pw"))
    assert store.find(old) is not None and store.find(used) is None


def test_a_session_is_logged_in_only_under_the_password_it_was_made_with():
    _, session = SessionStore().create(fingerprint(b"pw"))
    assert session.logged_in(fingerprint(b"pw"))
    assert not session.logged_in(fingerprint(b"other"))
    _, anonymous = SessionStore().create()
    assert not anonymous.logged_in(fingerprint(b"pw"))
