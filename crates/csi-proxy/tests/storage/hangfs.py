#!/usr/bin/python3
"""A FUSE file system with one file, `disk.img`, backed by a real file,
whose reads and writes wait while a marker file exists: the backing file
of a loop device whose I/O hangs (as on a LUN queueing without a path), or
an executable on a file system that stops answering (mode 0755).

While MARKER.trickle exists, each read instead returns one byte after
0.9 s (a file system that answers, too slowly to be of use). While
MARKER.slow exists, each read returns all it asked for after 0.45 s (or
the seconds the marker holds): with FUSE's 128 KiB requests, 256 KiB per
0.9 s (slow, but progress).

usage: hangfs.py BACKING MARKER MOUNTPOINT   (runs in the foreground)
"""
import errno
import os
import stat
import sys
import time

from fusepy import FUSE, FuseOSError, Operations

NAME = "/disk.img"


class HangFs(Operations):
    def __init__(self, backing, marker):
        self.backing = backing
        self.marker = marker
        self.fd = os.open(backing, os.O_RDWR)

    def wait(self):
        while os.path.exists(self.marker):
            time.sleep(0.05)

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path != NAME:
            raise FuseOSError(errno.ENOENT)
        size = os.fstat(self.fd).st_size
        return {"st_mode": stat.S_IFREG | 0o755, "st_nlink": 1, "st_size": size}

    def readdir(self, path, fh):
        return [".", "..", NAME[1:]]

    def open(self, path, flags):
        if path != NAME:
            raise FuseOSError(errno.ENOENT)
        return 0

    def read(self, path, size, offset, fh):
        self.wait()
        if os.path.exists(self.marker + ".trickle"):
            time.sleep(0.9)
            return os.pread(self.fd, 1, offset)
        slow = self.marker + ".slow"
        if os.path.exists(slow):
            try:
                with open(slow) as f:
                    delay = float(f.read().strip() or "0.45")
            except (OSError, ValueError):
                delay = 0.45
            time.sleep(delay)
        return os.pread(self.fd, size, offset)

    def write(self, path, data, offset, fh):
        self.wait()
        return os.pwrite(self.fd, data, offset)

    def truncate(self, path, length, fh=None):
        os.ftruncate(self.fd, length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        self.wait()
        os.fsync(self.fd)
        return 0


if __name__ == "__main__":
    backing, marker, mountpoint = sys.argv[1:4]
    # direct_io: every read reaches us (no page cache in front of the file).
    FUSE(HangFs(backing, marker), mountpoint, foreground=True, nothreads=False,
         direct_io=True, allow_other=True)
