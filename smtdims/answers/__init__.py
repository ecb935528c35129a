"""What reads answers: explanations, constraint diagnostics and the fixes of an equation."""
