"""Episodes: static tasks lifted into typed multi-turn episodes with withheld slots, revisions and commitments."""
