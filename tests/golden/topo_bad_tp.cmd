topo a6000x8 --tp 16
