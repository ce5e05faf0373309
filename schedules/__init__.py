"""AutoTVM-style schedule templates (knobs -> Steps) and default schedules for the operator library."""
