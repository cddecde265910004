"""Import roots: the folders an operator trusts the service to read documents from, and the fence
around them.

The roots come from configuration only, never from a request: ``KNOWLEDGE_IMPORT_ROOTS``
(``name=/abs/path`` entries, comma separated, open to every tenant) and ``KNOWLEDGE_IMPORT_ROOTS_FILE``
(TOML: ``[roots.NAME]`` with ``path`` and optionally ``tenants = [...]``). Each root is resolved
(symlinks, ``..``) when the settings are read.

Two steps, each of which refuses on its own:

- :meth:`ImportRoots.resolve` resolves a requested path (symlinks, ``..``) and checks the result
  lies under a root the tenant may use, before anything is read (``PathRefused`` otherwise);
- :func:`open_fenced` opens that resolved path with ``O_NOFOLLOW`` (a final component that has
  become a symlink is refused) and then asks the kernel where the opened descriptor really is
  (``/proc/self/fd``): a directory on the way swapped for a symlink between the check and the open
  is caught there, and so is anything else that makes the open land outside the root. Only a
  regular file is read.

Ingest resolves and checks a path, then asks content-index to import it; content-index resolves,
checks and opens it again on its side: neither fence is the only one.
"""

from __future__ import annotations

import errno
import os
import stat
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from knowledge_runtime.errors import InvalidField, NotFound
from knowledge_runtime.settings import Env, SettingsError

MAX_PATH_CHARS = 4096
_ROOT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


class PathRefused(InvalidField):
    """A path outside every import root the caller may use (after resolving symlinks and ``..``),
    or one that is not a regular file: nothing of it is read."""

    def __init__(self, path: str, why: str, *, field: str = "paths") -> None:
        super().__init__(field, f"the path {path!r} is refused: {why}", reason="PATH_REFUSED")


class PathNotFound(NotFound):
    reason = "PATH_NOT_FOUND"

    def __init__(self, path: str) -> None:
        super().__init__(f"no file at {path!r} under the import roots")


@dataclass(frozen=True, slots=True)
class ImportRoot:
    name: str
    path: Path  # resolved, absolute
    tenants: frozenset[str] | None = None  # None: every tenant

    def open_to(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """A requested path after resolving, inside ``root``: ``real`` is absolute, ``relative`` its
    path under the root (what findings record)."""

    root: ImportRoot
    real: Path
    relative: str


def within(real: PurePosixPath, root: PurePosixPath) -> bool:
    """Whether the resolved ``real`` is ``root`` itself or lies under it (by whole components:
    ``/srv/docs-private`` is not under ``/srv/docs``)."""
    return real == root or root in real.parents


@dataclass(frozen=True, slots=True)
class ImportRoots:
    roots: tuple[ImportRoot, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.roots)

    def for_tenant(self, tenant: str) -> list[ImportRoot]:
        return [root for root in self.roots if root.open_to(tenant)]

    def named(self, name: str, tenant: str) -> ImportRoot | None:
        """The root of that name the tenant may use; another tenant's root is as absent."""
        for root in self.roots:
            if root.name == name and root.open_to(tenant):
                return root
        return None

    def resolve(self, path: str, tenant: str, *, field: str = "paths") -> ResolvedPath:
        """``path`` (absolute) with every symlink and ``..`` resolved, checked against the roots
        open to ``tenant`` before anything is read. Outside every one: ``PathRefused`` (whether
        or not something exists there); inside but absent: ``PathNotFound``."""
        if not path or len(path) > MAX_PATH_CHARS:
            raise PathRefused(path[:100], f"a path is 1 to {MAX_PATH_CHARS} characters", field=field)
        if not path.startswith("/"):
            raise PathRefused(path, "the path must be absolute", field=field)
        real = Path(os.path.realpath(path))  # symlinks and '..', as far as the path exists
        for root in self.for_tenant(tenant):
            if within(PurePosixPath(real), PurePosixPath(root.path)):
                if not real.exists():
                    raise PathNotFound(path)
                return ResolvedPath(root, real, real.relative_to(root.path).as_posix())
        raise PathRefused(path, "it is not under an import root", field=field)

    @classmethod
    def from_env(cls, env: Env | None = None) -> ImportRoots:
        env = env or Env()
        entries: dict[str, ImportRoot] = {}
        text = env.str("IMPORT_ROOTS")
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, where = item.partition("=")
            if not sep:
                raise SettingsError(f"KNOWLEDGE_IMPORT_ROOTS: {item!r} is not name=/absolute/path")
            _add(entries, _root(name.strip(), where.strip(), None, "KNOWLEDGE_IMPORT_ROOTS"))
        file = env.path("IMPORT_ROOTS_FILE")
        if file is not None:
            for root in _roots_from_file(file):
                _add(entries, root)
        return cls(tuple(entries.values()))


def _add(entries: dict[str, ImportRoot], root: ImportRoot) -> None:
    if root.name in entries:
        raise SettingsError(f"import root {root.name!r} is configured twice")
    entries[root.name] = root


def _root(name: str, where: str, tenants: frozenset[str] | None, origin: str) -> ImportRoot:
    if not name or len(name) > 64 or not set(name) <= _ROOT_NAME_CHARS:
        raise SettingsError(f"{origin}: root name {name!r} must be 1-64 of a-z, 0-9, - and _")
    if not where.startswith("/"):
        raise SettingsError(f"{origin}: root {name!r} must be an absolute path, got {where!r}")
    path = Path(os.path.realpath(where))
    if not path.is_dir():
        raise SettingsError(f"{origin}: root {name!r} ({where}) is not a directory")
    if path == Path("/"):
        raise SettingsError(f"{origin}: root {name!r} must not be the filesystem root")
    return ImportRoot(name, path, tenants)


def _roots_from_file(file: Path) -> list[ImportRoot]:
    origin = "KNOWLEDGE_IMPORT_ROOTS_FILE"
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise SettingsError(f"{origin}: cannot read {file} ({error.strerror})") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{origin}: {file} is not TOML ({error})") from None
    roots = data.get("roots", {})
    if not isinstance(roots, Mapping):
        raise SettingsError(f"{origin}: [roots] must be a table of roots")
    found = []
    for name, spec in roots.items():
        if not isinstance(spec, Mapping) or not isinstance(spec.get("path"), str):
            raise SettingsError(f'{origin}: [roots.{name}] needs path = "/absolute/path"')
        tenants = spec.get("tenants")
        if tenants is not None and not (isinstance(tenants, list) and all(isinstance(t, str) for t in tenants)):
            raise SettingsError(f"{origin}: [roots.{name}] tenants must be a list of tenant names")
        found.append(_root(name, spec["path"], frozenset(tenants) if tenants is not None else None, origin))
    return found


def fd_path(fd: int) -> Path:
    """Where the kernel says an open descriptor is (Linux ``/proc/self/fd``)."""
    return Path(os.readlink(f"/proc/self/fd/{fd}"))


def open_fenced(resolved: ResolvedPath) -> int:
    """A read-only descriptor on the resolved path, refusing a final symlink (``O_NOFOLLOW``), a
    descriptor that landed anywhere but that very path under its root, and anything but a regular
    file. The caller closes it."""
    shown = str(resolved.real)
    try:
        fd = os.open(resolved.real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PathRefused(shown, "it became a symbolic link") from None
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            raise PathNotFound(shown) from None
        raise PathRefused(shown, f"it cannot be opened ({error.strerror})") from None
    try:
        landed = fd_path(fd)
        if landed != resolved.real or not within(PurePosixPath(landed), PurePosixPath(resolved.root.path)):
            raise PathRefused(shown, "it moved out of its import root while being opened")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathRefused(shown, "it is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_chunks(fd: int, piece: int = 256 * 1024) -> Iterator[bytes]:
    """The descriptor's bytes in pieces, never whole in memory; closes it at the end."""
    try:
        while data := os.read(fd, piece):
            yield data
    finally:
        os.close(fd)


def walk_files(root: ImportRoot, limit: int = 100_000) -> Iterator[str]:
    """Paths (relative to the root, in a stable order) of the regular files under ``root``,
    never following a symbolic link (a linked file or directory is skipped), hidden entries
    (a name starting with ``.``) skipped, at most ``limit``."""
    seen = 0
    for directory, subdirs, files in os.walk(root.path, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        here = Path(directory)
        for name in sorted(files):
            if name.startswith("."):
                continue
            full = here / name
            try:
                info = full.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            yield full.relative_to(root.path).as_posix()
            seen += 1
            if seen >= limit:
                return
