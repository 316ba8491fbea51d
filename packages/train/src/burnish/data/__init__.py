"""burnish.data: datasets, batchers, the DataLoader and dataset sources (MNIST, images, CSV)."""
