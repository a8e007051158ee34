"""PLACEHOLDER: the .likert accessor; replace this whole file."""
