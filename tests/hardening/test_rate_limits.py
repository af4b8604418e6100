"""Security pass, H1 and M4: limits key on the real client behind the proxy, never on a value the client wrote;
a username is limited wherever the attempts come from; /admin/login/ is limited like the researcher login."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from annotation.ratelimit import client_ip

PROXY = "10.0.0.2"  # the README's nginx, as the app sees it


def login(client, username, password, remote=PROXY, forwarded=None, url=None):
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return client.post(url or reverse("login"), {"username": username, "password": password}, **extra)


def test_behind_the_proxy_each_client_has_its_own_budget(settings, researcher, other_researcher):
    settings.BEHIND_PROXY = True
    attacker = Client()
    for n in range(10):  # guessing across usernames from one address
        login(attacker, f"nobody-{n}", "guess", forwarded="203.0.113.5")
    assert login(attacker, "alice", "pw-alice", forwarded="203.0.113.5").status_code == 429
    # another researcher behind the same proxy is not locked out
    assert login(Client(), "bob", "pw-bob", forwarded="198.51.100.7").status_code == 302


def test_a_client_cannot_pick_its_address_behind_the_proxy(settings, researcher):
    settings.BEHIND_PROXY = True
    attacker = Client()
    # the client writes its own X-Forwarded-For; the proxy appends the address it saw, which is what counts
    for n in range(10):
        login(attacker, f"nobody-{n}", "guess", forwarded=f"192.0.2.{n}, 203.0.113.5")
    assert login(attacker, "alice", "pw-alice", forwarded="192.0.2.99, 203.0.113.5").status_code == 429


def test_without_the_proxy_setting_the_header_is_ignored(settings, researcher):
    settings.BEHIND_PROXY = False
    attacker = Client()
    for n in range(10):
        login(attacker, f"nobody-{n}", "guess", remote="203.0.113.5", forwarded=f"192.0.2.{n}")
    assert login(attacker, "alice", "pw-alice", remote="203.0.113.5", forwarded="192.0.2.200").status_code == 429


def test_a_username_is_limited_wherever_the_guesses_come_from(researcher, other_researcher):
    for n in range(10):  # ten addresses, one guess each: no address reaches its limit
        login(Client(), "alice", "guess", remote=f"198.51.100.{n}")
    assert login(Client(), "alice", "pw-alice", remote="198.51.100.200").status_code == 429
    assert login(Client(), "bob", "pw-bob", remote="198.51.100.1").status_code == 302  # others unaffected


def test_the_admin_login_is_limited_too(db):
    get_user_model().objects.create_superuser("root", password="pw-root-correct")
    admin_login = reverse("admin:login")
    for _ in range(10):
        login(Client(), "root", "guess", remote="203.0.113.9", url=admin_login)
    guessed = Client()
    assert login(guessed, "root", "pw-root-correct", remote="203.0.113.77", url=admin_login).status_code == 429
    assert guessed.get("/admin/").status_code == 302  # no session was made


def test_client_ip_is_the_right_most_hop_the_proxy_added(settings, rf):
    settings.BEHIND_PROXY = True
    request = rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.5")
    assert client_ip(request) == "203.0.113.5"
    assert client_ip(rf.get("/", REMOTE_ADDR=PROXY)) == PROXY  # no header: the peer itself
    assert client_ip(rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="not-an-address")) == PROXY
    settings.BEHIND_PROXY = False
    assert client_ip(request) == PROXY


def test_open_link_sign_ups_are_limited_per_client_behind_the_proxy(settings, study):
    from annotation.models import Study

    settings.BEHIND_PROXY = True
    Study.objects.filter(pk=study.pk).update(open_link_enabled=True)
    for _ in range(30):
        Client().post(study.open_link_path(), REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert (
        Client().post(study.open_link_path(), REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 429
    )
    # someone else behind the same proxy still joins
    assert Client().post(
        study.open_link_path(), REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7"
    ).status_code in (200, 302)


def test_open_link_sign_ups_count_an_ipv6_48_as_one_site(settings, study):
    """Each /64 was a client of its own, so one /48 (65,536 of them) could join without end; now its /56 and /48
    have a few clients' allowance (``ratelimit.WIDER_NETWORKS``), read behind the proxy as every limit is."""
    from annotation.models import Rater, Study
    from annotation.ratelimit import WIDER_NETWORKS

    settings.BEHIND_PROXY = True
    Study.objects.filter(pk=study.pk).update(open_link_enabled=True)

    def join(address: str) -> int:
        return Client().post(study.open_link_path(), REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=address).status_code

    per_56 = 30 * WIDER_NETWORKS[56]
    home = [join(f"2001:db8:42:{n:x}::1") for n in range(per_56 + 5)]  # /64s 0..x of 2001:db8:42::/56
    assert home.count(429) == 5 and 429 not in home[:per_56]
    per_48 = 30 * WIDER_NETWORKS[48]
    rest = [join(f"2001:db8:42:{n:x}00::1") for n in range(1, 60)]  # other /56s of the same /48
    assert rest.count(429) == 59 - (per_48 - per_56)
    assert Rater.objects.filter(study=study, source="open_link").count() == per_48
    assert join("2001:db8:43::1") in (200, 302)  # another /48 is another site
