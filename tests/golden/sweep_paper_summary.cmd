sweep --profile a6000x8 --grid paper --summary
