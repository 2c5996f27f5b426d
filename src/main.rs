fn main() {
    std::process::exit(rfs::cli::run());
}
