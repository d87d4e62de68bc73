"""Downloads and checks for vision datasets: torchvision.datasets.utils' download_url,
check_integrity, extract_archive, with shapeflow errors that say what to do offline."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile

from ...errors import ShapeflowError

USER_AGENT = "pytorch/vision"  # some mirrors refuse Python's default agent


class DatasetError(ShapeflowError, RuntimeError):
    """A dataset's files are missing, corrupted, or could not be downloaded."""

    kind = "DatasetError"


class DownloadError(DatasetError):
    """A download failed (offline, a dead mirror, or a file whose md5 does not match)."""

    kind = "DownloadError"


def calculate_md5(fpath: str | os.PathLike, chunk_size: int = 1024 * 1024) -> str:
    """The md5 hex digest of a file."""
    md5 = hashlib.md5(usedforsecurity=False)
    with open(fpath, "rb") as f:
        while chunk := f.read(chunk_size):
            md5.update(chunk)
    return md5.hexdigest()


def check_md5(fpath: str | os.PathLike, md5: str) -> bool:
    """Whether the file's md5 is md5."""
    return md5 == calculate_md5(fpath)


def check_integrity(fpath: str | os.PathLike, md5: str | None = None) -> bool:
    """Whether the file exists and (when md5 is given) has that md5."""
    if not os.path.isfile(fpath):
        return False
    return md5 is None or check_md5(fpath, md5)


def _offline(url: str, err: Exception) -> DownloadError:
    return DownloadError(f"download of {url} failed: {getattr(err, 'reason', err)}",
                         op="download", hint="check the network, or fetch the file elsewhere "
                         "and place it under root (then download=False finds it)")


def download_url(url: str, root: str | os.PathLike, filename: str | None = None,
                 md5: str | None = None) -> None:
    """Download url to root/filename, unless a file with that md5 is there already."""
    root = os.path.expanduser(root)
    fpath = os.path.join(root, filename or os.path.basename(url))
    if check_integrity(fpath, md5):
        return
    os.makedirs(root, exist_ok=True)
    part = fpath + ".part"  # a broken download never looks complete
    try:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        with urllib.request.urlopen(request) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out, 1024 * 1024)
    except (urllib.error.URLError, OSError) as err:
        if os.path.exists(part):
            os.remove(part)
        raise _offline(url, err) from err
    os.replace(part, fpath)
    if not check_integrity(fpath, md5):
        raise DownloadError(f"download of {url} gave a file whose md5 is not {md5}",
                            op="download", hint="the mirror may serve a different file; "
                            "delete it and retry")


def extract_archive(from_path: str | os.PathLike, to_path: str | os.PathLike | None = None,
                    remove_finished: bool = False) -> str:
    """Unpack a .tar(.gz/.bz2/.xz), .tgz, .zip or .gz file into to_path; returns to_path."""
    from_path = os.fspath(from_path)
    to_path = os.path.dirname(from_path) if to_path is None else os.fspath(to_path)
    name = from_path.lower()
    if name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz")):
        with tarfile.open(from_path) as tar:
            tar.extractall(to_path, filter="data")  # no paths outside to_path
    elif name.endswith(".zip"):
        with zipfile.ZipFile(from_path) as z:
            z.extractall(to_path)
    elif name.endswith(".gz"):
        target = os.path.join(to_path, os.path.basename(from_path)[:-3])
        with gzip.open(from_path, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        raise DatasetError(f"extract_archive: unknown archive type of {from_path}",
                           op="extract_archive")
    if remove_finished:
        os.remove(from_path)
    return to_path


def download_and_extract_archive(url: str, download_root: str | os.PathLike,
                                 extract_root: str | os.PathLike | None = None,
                                 filename: str | None = None, md5: str | None = None,
                                 remove_finished: bool = False) -> None:
    """download_url, then extract_archive into extract_root (download_root by default)."""
    download_root = os.path.expanduser(download_root)
    filename = filename or os.path.basename(url)
    download_url(url, download_root, filename, md5)
    extract_archive(os.path.join(download_root, filename), extract_root or download_root,
                    remove_finished)


__all__ = ["DatasetError", "DownloadError", "calculate_md5", "check_integrity", "check_md5",
           "download_and_extract_archive", "download_url", "extract_archive"]
