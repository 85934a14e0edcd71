topo a6000x8 --json
