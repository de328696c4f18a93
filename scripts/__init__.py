"""Project scripts: set-up helpers, stub generation, the mesh runner, contract snapshot."""
