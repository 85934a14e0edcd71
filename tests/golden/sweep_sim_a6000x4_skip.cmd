sweep --profile a6000x4 --grid paper --sim --summary --stride 16
