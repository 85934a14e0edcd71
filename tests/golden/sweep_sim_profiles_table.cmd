sweep --grid paper --sim --summary --stride 24 --profiles a6000x4,${SRC}/profiles/rtx3090x4-nvpairs.json
