"""Files: read, write and unpack a tar, with errors that say what went wrong."""

import errno
import io
import os
import stat


class FileError(Exception):
    pass


def describe_os_error(e, path):
    if isinstance(e, FileNotFoundError):
        return f"no such file: {path}"
    if isinstance(e, PermissionError):
        return f"permission denied: {path}"
    if isinstance(e, IsADirectoryError):
        return f"is a directory: {path}"
    if isinstance(e, NotADirectoryError):
        return f"not a directory: a parent of {path} is a file"
    if e.errno == errno.ENOSPC:
        return f"no space left on device: {path}"
    if e.errno == errno.EROFS:
        return f"read-only file system: {path}"
    return f"{e.strerror or e}: {path}"


def read_file(path, max_bytes):
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise FileError(f"is a directory: {path}")
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"not a regular file: {path}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileError(too_large(path, st.st_size, max_bytes))
        with open(path, "rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as e:
        raise FileError(describe_os_error(e, path)) from None
    if max_bytes is not None and len(data) > max_bytes:
        raise FileError(too_large(path, len(data), max_bytes))
    return data


def too_large(path, size, limit):
    size_text = size if size <= limit + 1 else f"more than {limit}"
    return f"file too large: {path} is {size_text} bytes, over the {limit}-byte limit"


def write_file(path, data, mode):
    try:
        if os.path.isdir(path):
            raise FileError(f"is a directory: {path}")
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        # mode None keeps an existing file's permissions (edits must not drop +x)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
    except FileExistsError:
        raise FileError(f"not a directory: a parent of {path} is a file") from None
    except OSError as e:
        raise FileError(describe_os_error(e, path)) from None


def untar(dest, data):
    import tarfile  # here, not at the top: a fifth of the guest's start, for a rare op

    try:
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
    except OSError as e:
        raise FileError(describe_os_error(e, dest)) from None
    except tarfile.TarError as e:
        raise FileError(f"could not unpack into {dest}: {e}") from None
