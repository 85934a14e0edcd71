simulate --m 8192 --n 20480 --k 5120 --strategy fuse:star
