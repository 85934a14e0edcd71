sweep --grid nope
