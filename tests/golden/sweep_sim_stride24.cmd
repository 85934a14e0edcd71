sweep --profile a6000x8 --grid paper --sim --summary --stride 24
