"""A second route to every released gold: data/raw read with plain readers (csv text through pandas, zipfile, rdflib)
and the mapping's rules and each family's one-sentence definition written again here, without the store, the tools or
pipeline/ (issue 51). Agreement with the build means the gold means what its definition says."""
