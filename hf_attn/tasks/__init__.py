"""Tasks and datasets an experiment trains and scores on (`length`: generated length-generalization tasks;
`scan`: SCAN's length split read from its public files)."""
