"""The Gymnasium environment over a compiled candidate pool (imports only ``pools``)."""
