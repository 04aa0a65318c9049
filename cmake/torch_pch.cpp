// Anchors the shared precompiled header target (cmake/Torch.cmake); holds no code.
