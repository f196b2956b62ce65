"""Models written as PyTorch users write them, each with a planted device bug next to the clean
version. Lines a finding must point at carry a `# culprit:` comment."""
