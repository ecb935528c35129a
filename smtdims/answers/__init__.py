"""What reads answers: explanations, suggested fixes, constraint diagnostics and the fixes of an equation."""
