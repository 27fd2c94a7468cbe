"""Release: the audited episodes packaged with a manifest, a dataset card and Croissant metadata; verification."""
