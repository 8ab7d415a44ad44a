#!/usr/bin/python3
"""A FUSE file system holding `lnk` (a symbolic link to TARGET) and a
directory `d`. Look-ups and attributes are answered at once and cached for
an hour (as a network file system with a metadata cache); while MARKER
exists, reading the link never returns (the server holding it is gone).

usage: linkfs.py MARKER MOUNTPOINT TARGET   (runs in the foreground)
"""
import errno
import os
import stat
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class LinkFs(Operations):
    def __init__(self, marker, target):
        self.marker = marker
        self.target = target

    def getattr(self, path, fh=None):
        if path in ("/", "/d"):
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path == "/lnk":
            return {"st_mode": stat.S_IFLNK | 0o777, "st_nlink": 1,
                    "st_size": len(self.target)}
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "lnk", "d"]

    def readlink(self, path):
        while os.path.exists(self.marker):
            time.sleep(0.05)
        return self.target


if __name__ == "__main__":
    marker, mountpoint, target = sys.argv[1:4]
    FUSE(LinkFs(marker, target), mountpoint, foreground=True, allow_other=True,
         entry_timeout=3600, attr_timeout=3600, negative_timeout=3600)
