"""Hypothesis example databases for campaigns: a folder, Redis, or read-through of another database.

``--database`` takes a folder path (Hypothesis's :class:`DirectoryBasedExampleDatabase`, safe for
several processes on one machine) or a Redis URL, ``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`` or
``rediss://...`` for TLS, the password best in ``$JFA_REDIS_PASSWORD`` (:class:`RedisExampleDatabase`,
for workers on several machines; needs the ``redis`` package: ``pip install 'jfa-verify[redis]'``).
``--read-from`` adds databases that are read but never written
(:class:`MultiplexedDatabase` over :class:`ReadOnlyDatabase`): start from a CI database without
changing it. :class:`SavedAsSecondary` replays saved failures so that Hypothesis shrinks them (another campaign's,
met in a shared database).

Every campaign's keys are prefixed with the kernel and device type (:class:`CampaignDatabase`), so
one database serves many kernels, and a saved example of a known finding stays in the database when
the campaign treats it as known (Hypothesis would otherwise delete an example that no longer fails).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping, NamedTuple, Optional, Sequence

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.paths import folder_problem

__all__ = ["PASSWORD_VARIABLE", "CampaignDatabase", "RedisURL", "SavedAsSecondary", "open_database", "parse_redis_url",
           "redacted"]


PASSWORD_VARIABLE = "JFA_REDIS_PASSWORD"  # the Redis password, kept off the command line (and out of `ps`)
_SCHEMES = ("redis://", "rediss://")
CONNECT_TIMEOUT_S = 20.0  # (a TLS handshake with a plain server waits for ever without one)
_FORM = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (rediss:// for TLS)"


class RedisURL(NamedTuple):
    """A parsed Redis URL (:func:`parse_redis_url`)."""

    host: str
    port: int
    db: int
    username: Optional[str] = None
    password: Optional[str] = None
    tls: bool = False


def redacted(spec: str) -> str:
    """``spec`` with the password of a Redis URL replaced by ``***`` (for messages and reports)."""
    scheme, sep, rest = spec.partition("://")
    userinfo, at, hostpart = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return spec
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{hostpart}"


def parse_redis_url(spec: str, environ: Optional[Mapping[str, str]] = None) -> RedisURL:
    """A Redis URL in the standard forms: ``redis://HOST[:PORT][/DB]``, with ``USER:PASSWORD@`` or ``:PASSWORD@``
    before the host (percent-encoded where needed), ``rediss://`` for TLS; the port defaults to 6379, the database
    to 0. A URL without a password takes ``$JFA_REDIS_PASSWORD`` (``environ``, default ``os.environ``) when set,
    so that the password need not be on the command line.

    Raises:
        InvalidInput: another scheme, no host, a port that is not an integer in 1..65535, or a db that is not an
            integer >= 0; the message never holds the password.
    """
    import os
    from urllib.parse import unquote, urlsplit

    environ = os.environ if environ is None else environ
    shown = redacted(spec)
    if not spec.startswith(_SCHEMES):
        raise InvalidInput(f"--database {shown!r}: expected {_FORM}, e.g. redis://localhost:6379")
    try:
        url = urlsplit(spec)
        port = url.port
    except ValueError:
        port = -1
    if port == -1 or not url.hostname or url.query or url.fragment:
        raise InvalidInput(f"--database {shown!r}: expected {_FORM}, e.g. redis://localhost:6379")
    db = url.path.lstrip("/")
    if db and not db.isdigit() or url.path.count("/") > 1:
        raise InvalidInput(f"--database {shown!r}: the database number {db!r} is not an integer >= 0")
    password = unquote(url.password) if url.password is not None else environ.get(PASSWORD_VARIABLE) or None
    return RedisURL(url.hostname, port or 6379, int(db or 0), unquote(url.username) if url.username else None,
                    password, url.scheme == "rediss")


def _one(spec: str) -> ExampleDatabase:
    if spec.startswith(_SCHEMES):
        url = parse_redis_url(spec)
        shown = redacted(spec)
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise InvalidInput(f"--database {shown}: the redis package is not installed; "
                               f"pip install 'jfa-verify[redis]'") from None
        client = redis.Redis(host=url.host, port=url.port, db=url.db, username=url.username, password=url.password,
                             ssl=url.tls, socket_connect_timeout=CONNECT_TIMEOUT_S)
        try:
            client.ping()
        except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
            if not isinstance(e, redis.exceptions.AuthenticationError) and "auth" not in str(e).lower():
                raise
            if url.password is None:  # (NOAUTH, or HELLO refused: the server needs one and none was given)
                raise InvalidInput(f"--database {shown}: the Redis server needs a password ({e}); set "
                                   f"${PASSWORD_VARIABLE} (or give redis://[USER]:PASSWORD@HOST:PORT)") from None
            raise InvalidInput(f"--database {shown}: the Redis server refused the credentials ({e}); give the password "
                               f"in ${PASSWORD_VARIABLE} (or in the URL: redis://[USER]:PASSWORD@HOST:PORT)") from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            tls = ("; a TLS server needs rediss://" if not url.tls else "; is it a TLS server? (rediss:// is TLS)")
            raise InvalidInput(f"--database {shown}: no Redis server answers there ({e}); start one "
                               f"(redis-server --port {url.port}) or give a folder{tls}") from None
        return RedisExampleDatabase(client)
    if "://" in spec:
        raise InvalidInput(f"--database {redacted(spec)!r}: only folders and {_FORM} are supported")
    path = Path(spec)
    if path.exists() and not path.is_dir():
        raise InvalidInput(f"--database {spec}: is a file; give a folder (created if missing)")
    problem = folder_problem(path)
    if problem:  # (Hypothesis would drop every example it saves there without a word)
        raise InvalidInput(f"--database {spec}: {problem}; give a folder you can write to (created if missing)")
    return DirectoryBasedExampleDatabase(str(path))


def default_database(corpus_dir: "str | Path") -> str:
    """The database folder of a campaign given no ``--database``: ``.hypothesis`` in its reproducer folder."""
    return str(Path(corpus_dir) / ".hypothesis")


def open_database(spec: str, read_from: Sequence[str] = ()) -> ExampleDatabase:
    """The database named by ``spec`` (folder or Redis URL), reading through ``read_from`` without writing it.

    Raises:
        InvalidInput: a malformed spec, a missing ``redis`` package, or no server at a Redis URL.
    """
    main = _one(spec)
    if not read_from:
        return main
    for other in read_from:
        if "://" not in other and not Path(other).is_dir():
            raise InvalidInput(f"--read-from {other}: no such folder; give the database folder of another campaign "
                               f"(its --database, or REPRODUCERS/.hypothesis)")
    return MultiplexedDatabase(main, *(ReadOnlyDatabase(_one(s)) for s in read_from))


class CampaignDatabase(ExampleDatabase):
    """A database seen through a key prefix (kernel and device type), keeping examples of known findings.

    Args:
        db: the shared database.
        prefix: prepended to every key (``b"<kernel>/<device type>/"``).
        keep: called before each delete; True keeps the entry. A campaign answers True while the last
            case it ran was a failure it took as an example of a known finding.
    """

    def __init__(self, db: ExampleDatabase, prefix: bytes, keep: Optional[Callable[[], bool]] = None):
        super().__init__()
        self._db, self._prefix, self._keep = db, prefix, keep or (lambda: False)

    def __repr__(self) -> str:
        return f"CampaignDatabase({self._db!r}, {self._prefix!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, CampaignDatabase) and (self._db, self._prefix) == (other._db, other._prefix)

    def __hash__(self) -> int:
        return hash(self._prefix)

    def save(self, key: bytes, value: bytes) -> None:
        self._db.save(self._prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        yield from self._db.fetch(self._prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        if not self._keep():
            self._db.delete(self._prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._db.move(self._prefix + src, self._prefix + dest, value)

    def _start_listening(self) -> None:  # campaigns do not listen for changes
        pass

    def _stop_listening(self) -> None:
        pass


class SavedAsSecondary(ExampleDatabase):
    """``db`` with the saved failing examples (a test's primary key) read as that key's secondary examples, and every
    other key read empty; writes, deletes and moves reach ``db`` unchanged.

    Hypothesis takes a saved example that fails as saved for one it has already shrunk and does not shrink it (its
    reuse phase's fast path), but shrinks a failing secondary example. A database shared by campaigns on other
    folders holds their failures, some never shrunk (cut short), each a finding of no campaign reading it: replayed
    through this view, such a failure is shrunk as a drawn one is.
    """

    _SECONDARY = b".secondary"

    def __init__(self, db: ExampleDatabase):
        super().__init__()
        self._db = db

    def __repr__(self) -> str:
        return f"SavedAsSecondary({self._db!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, SavedAsSecondary) and self._db == other._db

    def __hash__(self) -> int:
        return hash((SavedAsSecondary, self._db))

    def save(self, key: bytes, value: bytes) -> None:
        self._db.save(key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        # (the secondary examples and the pareto front are not replayed again: Hypothesis shrinks their failures)
        if key.endswith(self._SECONDARY):
            yield from self._db.fetch(key[:-len(self._SECONDARY)])

    def delete(self, key: bytes, value: bytes) -> None:
        self._db.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._db.move(src, dest, value)

    def _start_listening(self) -> None:
        pass

    def _stop_listening(self) -> None:
        pass
