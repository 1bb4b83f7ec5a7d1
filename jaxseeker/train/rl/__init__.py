"""Group-relative RL: the loop behind `jaxseeker rl`, its rollouts, scoring, selection, update step and bench."""
