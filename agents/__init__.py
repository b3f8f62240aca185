"""Policies: CoBa routing variants, the paper's baselines and learned controllers, behind one registry."""
