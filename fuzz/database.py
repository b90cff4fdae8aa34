"""Hypothesis example databases for campaigns: a folder, Redis, or read-through of another database.

``--database`` takes a folder path (Hypothesis's :class:`DirectoryBasedExampleDatabase`, safe for
several processes on one machine) or ``redis://HOST:PORT[/DB]`` (:class:`RedisExampleDatabase`,
for workers on several machines; needs the ``redis`` package: ``pip install 'jfa-verify[redis]'``).
``--read-from`` adds databases that are read but never written
(:class:`MultiplexedDatabase` over :class:`ReadOnlyDatabase`): start from a CI database without
changing it.

Every campaign's keys are prefixed with the kernel and device type (:class:`CampaignDatabase`), so
one database serves many kernels, and a saved example of a known finding stays in the database when
the campaign treats it as known (Hypothesis would otherwise delete an example that no longer fails).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from hypothesis.database import (DirectoryBasedExampleDatabase, ExampleDatabase, MultiplexedDatabase,
                                 ReadOnlyDatabase)

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.paths import folder_problem

__all__ = ["CampaignDatabase", "open_database", "parse_redis_url"]


def parse_redis_url(spec: str) -> tuple[str, int, int]:
    """``redis://HOST:PORT[/DB]`` -> ``(host, port, db)``.

    Raises:
        InvalidInput: no host, a port that is not an integer in 1..65535, or a db that is not an integer >= 0.
    """
    rest = spec[len("redis://"):]
    hostport, _, db = rest.partition("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(f"--database {spec!r}: expected redis://HOST:PORT[/DB], e.g. redis://localhost:6379")
    if db and not db.isdigit():
        raise InvalidInput(f"--database {spec!r}: the database number {db!r} is not an integer >= 0")
    return host, int(port), int(db or 0)


def _one(spec: str) -> ExampleDatabase:
    if spec.startswith("redis://"):
        host, port, db = parse_redis_url(spec)
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise InvalidInput(f"--database {spec}: the redis package is not installed; "
                               f"pip install 'jfa-verify[redis]'") from None
        client = redis.Redis(host=host, port=port, db=db)
        try:
            client.ping()
        except redis.exceptions.ConnectionError as e:
            raise InvalidInput(f"--database {spec}: no Redis server answers there ({e}); start one "
                               f"(redis-server --port {port}) or give a folder") from None
        return RedisExampleDatabase(client)
    if "://" in spec:
        raise InvalidInput(f"--database {spec!r}: only folders and redis://HOST:PORT are supported")
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
