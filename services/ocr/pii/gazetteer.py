"""Korean administrative names the address recognizer anchors on (provinces, and their common short forms).

Provinces (시/도) are closed: 17 of them, each with the short forms people write (서울, 경기, 충북).
A district (시/군/구) or a neighbourhood (읍/면/동/리) is recognised by its suffix after a province,
and a road (로/길) by its suffix and number, so the package needs no district list to find an
address that starts with its province; an address written without one (``강남구 테헤란로 123``)
is found through the districts below (the 69 autonomous districts of the metropolitan cities and
the larger cities), or through a label (주소, 거주지).
"""

from __future__ import annotations

PROVINCES = (
    "서울특별시", "부산광역시", "대구광역시", "인천광역시", "광주광역시", "대전광역시", "울산광역시",
    "세종특별자치시", "경기도", "강원특별자치도", "강원도", "충청북도", "충청남도", "전북특별자치도",
    "전라북도", "전라남도", "경상북도", "경상남도", "제주특별자치도",
    "서울시", "부산시", "대구시", "인천시", "광주시", "대전시", "울산시", "세종시", "제주도",
    "서울", "부산", "대구", "인천", "광주", "대전", "울산", "세종", "경기", "강원", "충북", "충남", "전북",
    "전남", "경북", "경남", "제주",
)

DISTRICTS = (
    # Seoul
    "종로구", "중구", "용산구", "성동구", "광진구", "동대문구", "중랑구", "성북구", "강북구", "도봉구", "노원구",
    "은평구", "서대문구", "마포구", "양천구", "강서구", "구로구", "금천구", "영등포구", "동작구", "관악구",
    "서초구", "강남구", "송파구", "강동구",
    # Busan, Daegu, Incheon, Gwangju, Daejeon, Ulsan (the names not already above)
    "서구", "동구", "영도구", "부산진구", "동래구", "남구", "북구", "해운대구", "사하구", "금정구", "연제구",
    "수영구", "사상구", "기장군", "수성구", "달서구", "달성군", "미추홀구", "연수구", "남동구", "부평구",
    "계양구", "광산구", "유성구", "대덕구", "울주군",
    # large cities
    "수원시", "성남시", "고양시", "용인시", "부천시", "안산시", "안양시", "남양주시", "화성시", "평택시",
    "의정부시", "시흥시", "파주시", "김포시", "광명시", "청주시", "천안시", "전주시", "포항시", "창원시",
    "김해시", "제주시", "서귀포시", "춘천시", "원주시", "강릉시", "구미시", "경산시", "진주시", "여수시",
    "순천시", "목포시", "익산시", "군산시", "아산시", "세종시",
)

BANKS = (
    "국민은행", "KB국민", "국민", "신한은행", "신한", "우리은행", "우리", "하나은행", "하나", "농협", "NH농협",
    "기업은행", "IBK", "카카오뱅크", "카카오", "토스뱅크", "토스", "케이뱅크", "SC제일", "제일은행", "씨티",
    "새마을금고", "우체국", "수협", "대구은행", "iM뱅크", "부산은행", "경남은행", "광주은행", "전북은행",
    "제주은행", "산업은행", "신협",
)

# Surnames covering ~99 % of Koreans (통계청 2015 census order, the first 100 or so).
SURNAMES = set(
    "김이박최정강조윤장임한오서신권황안송류전홍고문양손배백허유남심노하곽성차주우구민진나지엄채원천방공현"
    "함변염여추도소석선설마길연위표명기반왕금옥육인맹제모탁국어은편용예봉경사부황보")
COMPOUND_SURNAMES = ("남궁", "제갈", "선우", "독고", "황보", "사공", "서문")
