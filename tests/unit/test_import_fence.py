"""The import roots' fence (knowledge_runtime.imports): resolving and checking a path before
anything is read, then opening it without following a swapped-in symlink and checking where the
opened descriptor really is. Real files, directories and symlinks in a temporary folder."""

import os

import pytest
from knowledge_runtime.imports import (
    ImportRoots,
    PathNotFound,
    PathRefused,
    open_fenced,
    read_chunks,
    walk_files,
)
from knowledge_runtime.settings import Env, SettingsError


@pytest.fixture
def layout(tmp_path):
    root = tmp_path / "docs"
    (root / "team").mkdir(parents=True)
    (root / "team" / "handbook.md").write_text("# Handbook\n\nThirty days of leave.\n")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0\n")
    (tmp_path / "docs-private").mkdir()  # a sibling whose name starts like the root's
    (tmp_path / "docs-private" / "salaries.txt").write_text("confidential\n")
    roots = ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS": f"docs={root}"}))
    return roots, root, outside


def test_a_file_under_the_root_resolves_to_its_real_path(layout):
    roots, root, _ = layout
    resolved = roots.resolve(str(root / "team" / "handbook.md"), "acme")
    assert resolved.real == (root / "team" / "handbook.md").resolve()
    assert resolved.relative == "team/handbook.md" and resolved.root.name == "docs"
    fd = open_fenced(resolved)
    assert b"".join(read_chunks(fd)) == b"# Handbook\n\nThirty days of leave.\n"


def test_a_symlink_out_of_the_root_is_refused(layout):
    roots, root, outside = layout
    (root / "team" / "link.md").symlink_to(outside / "passwd")
    with pytest.raises(PathRefused) as caught:
        roots.resolve(str(root / "team" / "link.md"), "acme")
    assert caught.value.reason == "PATH_REFUSED" and caught.value.code == "INVALID_ARGUMENT"


def test_a_symlinked_directory_out_of_the_root_is_refused(layout):
    roots, root, outside = layout
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathRefused):
        roots.resolve(str(root / "elsewhere" / "passwd"), "acme")


def test_dot_dot_out_of_the_root_is_refused(layout):
    roots, root, _ = layout
    with pytest.raises(PathRefused):
        roots.resolve(f"{root}/team/../../secret/passwd", "acme")
    # '..' that stays inside is fine
    assert roots.resolve(f"{root}/team/../team/handbook.md", "acme").relative == "team/handbook.md"


def test_an_absolute_path_elsewhere_is_refused_whether_or_not_it_exists(layout):
    roots, _, outside = layout
    for path in (str(outside / "passwd"), "/etc/passwd", str(outside / "absent")):
        with pytest.raises(PathRefused):
            roots.resolve(path, "acme")


def test_a_sibling_sharing_the_roots_prefix_is_outside(layout, tmp_path):
    roots, _, _ = layout
    with pytest.raises(PathRefused):
        roots.resolve(str(tmp_path / "docs-private" / "salaries.txt"), "acme")


def test_relative_empty_and_missing_paths(layout):
    roots, root, _ = layout
    for path in ("team/handbook.md", "", "x" * 5000):
        with pytest.raises(PathRefused):
            roots.resolve(path, "acme")
    with pytest.raises(PathNotFound) as caught:
        roots.resolve(str(root / "team" / "absent.md"), "acme")
    assert caught.value.code == "NOT_FOUND"


def test_a_file_that_becomes_a_symlink_between_check_and_read_is_refused(layout):
    roots, root, outside = layout
    target = root / "team" / "handbook.md"
    resolved = roots.resolve(str(target), "acme")  # checked: a regular file under the root
    target.unlink()
    target.symlink_to(outside / "passwd")  # swapped before the read
    with pytest.raises(PathRefused, match="symbolic link"):
        open_fenced(resolved)


def test_a_directory_that_becomes_a_symlink_between_check_and_read_is_refused(layout, tmp_path):
    roots, root, outside = layout
    resolved = roots.resolve(str(root / "team" / "handbook.md"), "acme")
    (outside / "handbook.md").write_text("not the handbook\n")
    os.rename(root / "team", tmp_path / "team-moved")
    (root / "team").symlink_to(outside, target_is_directory=True)  # O_NOFOLLOW alone would not see this
    with pytest.raises(PathRefused, match="moved out"):
        open_fenced(resolved)


def test_only_regular_files_are_read(layout):
    roots, root, _ = layout
    os.mkfifo(root / "team" / "pipe")
    with pytest.raises(PathRefused, match="regular file"):
        open_fenced(roots.resolve(str(root / "team" / "pipe"), "acme"))
    with pytest.raises(PathRefused, match="regular file"):
        open_fenced(roots.resolve(str(root / "team"), "acme"))


def test_a_walk_lists_regular_files_and_never_follows_links(layout):
    roots, root, outside = layout
    (root / "team" / "link.md").symlink_to(outside / "passwd")
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x")
    (root / "b.txt").write_text("b")
    assert list(walk_files(roots.roots[0])) == ["b.txt", "team/handbook.md"]


def test_roots_come_from_the_environment_and_a_file_with_tenants(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    file = tmp_path / "roots.toml"
    file.write_text(f'[roots.shared]\npath = "{tmp_path / "b"}"\ntenants = ["acme"]\n')
    roots = ImportRoots.from_env(
        Env({"KNOWLEDGE_IMPORT_ROOTS": f"open={tmp_path / 'a'}", "KNOWLEDGE_IMPORT_ROOTS_FILE": str(file)})
    )
    assert [r.name for r in roots.for_tenant("acme")] == ["open", "shared"]
    assert [r.name for r in roots.for_tenant("globex")] == ["open"]
    assert roots.named("shared", "globex") is None  # another tenant's root is as absent
    with pytest.raises(PathRefused):  # and its files are outside for that tenant
        (tmp_path / "b" / "f.txt").write_text("x")
        roots.resolve(str(tmp_path / "b" / "f.txt"), "globex")


@pytest.mark.parametrize(
    "value",
    ["docs", "docs=relative/path", "Bad Name=/tmp", "x=/", "dup=/tmp,dup=/tmp", "missing=/no/such/dir"],
)
def test_bad_roots_are_a_settings_error(value):
    with pytest.raises(SettingsError):
        ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS": value}))


def test_no_roots_configured_is_empty():
    roots = ImportRoots.from_env(Env({}))
    assert not roots and roots.for_tenant("acme") == []
