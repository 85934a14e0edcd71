simulate --m 4096 --n 4096 --k 4096 --tp 2 --strategy fuse:ring --trace out.json
