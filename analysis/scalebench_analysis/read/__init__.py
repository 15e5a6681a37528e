"""Reading results files: `loader.load` and the parts of a file it reads (decoding of
attributes, cells, timings, accuracy groups, batch-search probes, `/series`), the config
keys of specs (`keys`), and the lock-free reading of trace and watch (`h5text`). Nothing
here imports from tables/, output/, history/ or the command line."""
