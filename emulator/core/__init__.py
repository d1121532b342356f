"""What every part of the local stack shares: what an AWS call is, the fault switches, the event
pattern language, and the wake-ups from moto's side to the pollers."""
