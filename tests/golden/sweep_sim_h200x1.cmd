sweep --profile h200x1 --grid paper --sim --summary
