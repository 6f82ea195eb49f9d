"""The cache of generated modules holds code that is executed: it is used only while no other user can write to
it (directory made 0700, owned by this user, no group or other write bit, also on its __pycache__; entries regular
files of this user, not followed through symbolic links), and an entry cut short or edited anywhere is made again."""

import os
import stat

import pytest

from vtm_dynamics.core.estop import generated_dynamics as gd


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "generated"
    monkeypatch.setenv(gd.ENV_CACHE, str(folder))
    monkeypatch.delenv(gd.ENV_SWITCH, raising=False)
    return folder


def read(path) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def test_the_cache_directory_is_made_private(cache, planar_3r):
    gd.module_path(planar_3r, gd.cache_key(planar_3r, "test versions"))
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_an_entry_edited_in_its_middle_is_made_again(cache, planar_3r):
    key = gd.cache_key(planar_3r, "test versions")
    path = gd.module_path(planar_3r, key)
    good = read(path)
    lines = good.split("\n")
    k = next(i for i, line in enumerate(lines) if " = 1.0" in line or " = 0." in line)
    lines[k] = lines[k].split(" = ")[0] + " = 1234.5"  # a changed constant: first and last lines still name the key
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    assert gd.module_path(planar_3r, key) == path
    assert read(path) == good


@pytest.mark.parametrize("who", ["directory", "__pycache__", "entry"])
def test_a_cache_others_can_write_to_is_refused(cache, planar_3r, who):
    key = gd.cache_key(planar_3r, "test versions")
    path = gd.module_path(planar_3r, key)
    target = {"directory": str(cache), "__pycache__": os.path.join(str(cache), "__pycache__"), "entry": path}[who]
    if who == "__pycache__":
        os.makedirs(target, exist_ok=True)
    os.chmod(target, stat.S_IMODE(os.stat(target).st_mode) | stat.S_IWGRP | stat.S_IWOTH)
    with pytest.raises(OSError, match="writable by others"):
        gd.module_path(planar_3r, key)


def test_a_symbolic_link_in_place_of_an_entry_is_not_followed(cache, planar_3r, tmp_path):
    key = gd.cache_key(planar_3r, "test versions")
    path = gd.module_path(planar_3r, key)
    good = read(path)
    planted = tmp_path / "elsewhere.py"
    planted.write_text(good, encoding="utf-8")  # a valid entry, but outside the cache and linked in
    os.unlink(path)
    os.symlink(planted, path)
    assert gd.module_path(planar_3r, key) == path
    assert not os.path.islink(path) and read(path) == good
    assert planted.read_text(encoding="utf-8") == good  # the link's target was not written


def test_an_unsafe_cache_falls_back_to_pinocchio_with_the_reason(tmp_path, monkeypatch, planar_3r):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    monkeypatch.setenv(gd.ENV_CACHE, str(folder))
    robot = planar_3r.copy()
    robot.model.gravity.linear = robot.model.gravity.linear * 0.5  # a key no other test has loaded in this process
    assert gd.generated_stages(robot) is None
    assert "writable by others" in gd.unavailable_reason(robot)
    assert os.listdir(folder) == []
