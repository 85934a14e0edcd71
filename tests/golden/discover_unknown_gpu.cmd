discover --from-topo ${SRC}/tests/data/topo/nvlink_pairs_4x3090.txt --gpu tpu9
