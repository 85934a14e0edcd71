discover --from-topo ${SRC}/tests/data/topo/nvswitch_8xh100_nv18.txt --out p.json
