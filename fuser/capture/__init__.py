"""Capture: the backend Dynamo calls, AOTAutograd's decompositions and what they must keep whole."""
