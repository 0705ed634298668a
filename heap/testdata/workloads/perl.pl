# A Perl workload for carve record: a hash of 10^5 strings, sorted, churned.
use strict;
use warnings;

my %h;
for my $i (1 .. 100000) {
    $h{"key$i"} = join(",", map { $i * $_ } 1 .. ($i % 9 + 1));
}
my @sorted = sort { $h{$a} cmp $h{$b} } keys %h;
for my $i (1 .. 100000) {
    delete $h{"key$i"} if $i % 4 == 0;
    $h{"key$i"} .= "-updated" if $i % 4 == 1;
}
my %inv;
push @{ $inv{ length $h{$_} } }, $_ for keys %h;
print scalar(@sorted), " ", scalar(keys %h), " ", scalar(keys %inv), "\n";
