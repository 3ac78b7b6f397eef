"""What mpcheck knows of torch and the libraries around it, as data the engine reads."""
