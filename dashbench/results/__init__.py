"""What a run measured: the RunResult, its validation and its words, and a to-accuracy result in words."""
